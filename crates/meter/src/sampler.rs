//! The sampling loop.
//!
//! One thread reads the counters, paced by a `timerfd` armed once with an absolute first deadline
//! and a fixed interval (the kernel keeps the deadlines on a grid: no drift, unlike `sleep`
//! loops; Raffin & Trystram 2024 §IV-C). Each reading goes through a bounded queue to a second
//! thread that formats and writes rows and flushes once a second, so I/O latency never delays a
//! reading. When the queue is full the reading is not dropped: its joules are carried into the
//! next row that fits (counted as *coalesced*), so no energy is lost and the count is reported.
//!
//! Wrap safety: if the requested period is longer than a counter's wrap-safe period
//! ([`wattio_energy::max_safe_period`]), the loop reads several times per row.

use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::time::{Duration, Instant};
use wattio_energy::{
    max_safe_period, mono_ns, Accumulator, CounterDelta, CounterSpec, EnergyError, Source,
};
use wattio_progress::{Cancel, Sink};

use crate::meter::unix_now;
use crate::rows::RecordFormat;
use crate::sink::RowFormatter;

/// How the loop waits between readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// `timerfd` with absolute deadlines (the default).
    Timerfd,
    /// `std::thread::sleep(period)` after each reading: the paper's "badsleep", kept only so the
    /// pacing benchmark can compare the two side by side.
    Sleep,
}

/// Parameters of a sampling run.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Rows per second (per counter). Up to 1000 is supported; RAPL itself updates about every
    /// millisecond, so faster polling returns repeated values.
    pub freq_hz: f64,
    /// Stop after this long (None: until the cancel flag is set).
    pub duration: Option<Duration>,
    /// Capacity of the queue between the reading and the writing thread, in samples.
    pub queue_capacity: usize,
    pub pacing: Pacing,
    /// Told how many samples were handed to the writer so far, after each batch (for
    /// progress displays).
    pub progress: Sink<RecordProgress>,
}

/// How far a recording is: samples handed to the writer so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordProgress {
    pub samples: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            freq_hz: 10.0,
            duration: None,
            queue_capacity: 4096,
            pacing: Pacing::Timerfd,
            progress: Sink::none(),
        }
    }
}

/// One reading of every counter.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Seconds since the Unix epoch at the reading.
    pub unix_s: f64,
    /// CLOCK_MONOTONIC nanoseconds at the reading.
    pub mono_ns: u64,
    /// The deadline this reading was meant for (CLOCK_MONOTONIC ns).
    pub deadline_ns: u64,
    /// Joules per counter since the previous sample (including coalesced ones).
    pub joules: Vec<f64>,
    /// Whether any counter wrapped (and was corrected) in this interval.
    pub wrapped: bool,
}

/// What happened during a run.
#[derive(Debug, Clone, Default)]
pub struct SamplerStats {
    /// Samples handed to the writer.
    pub samples: u64,
    /// Timer expirations that passed while the reader was busy (readings skipped, energy kept).
    pub late_ticks: u64,
    /// Samples merged into a later one because the writer's queue was full.
    pub coalesced: u64,
    /// Counter wraps corrected.
    pub wraps: u64,
    /// Read errors (first few, with a count of the rest).
    pub errors: Vec<String>,
    pub wall_s: f64,
    /// Successful readings after the first.
    pub reads: u64,
    /// Per counter, the readings that found it where the previous one left it.
    pub unchanged_reads: Vec<u64>,
    /// Per counter, the joules of the run (every row's, added up).
    pub energy_j: Vec<f64>,
}

impl SamplerStats {
    fn count_changes(&mut self, deltas: &[CounterDelta]) {
        self.reads += 1;
        for ((u, j), d) in self
            .unchanged_reads
            .iter_mut()
            .zip(self.energy_j.iter_mut())
            .zip(deltas)
        {
            *j += d.joules;
            if d.joules == 0.0 && !d.wrapped {
                *u += 1;
            }
        }
    }

    /// One line per counter with the run's joules and their CO₂e by `co2e`; `estimated` says,
    /// per counter, whether its joules are a model's.
    pub fn co2e_lines(
        &self,
        counters: &[CounterSpec],
        estimated: &[bool],
        co2e: &wattio_energy::Co2e,
    ) -> Vec<String> {
        counters
            .iter()
            .zip(&self.energy_j)
            .zip(estimated)
            .map(|((c, &j), &est)| {
                format!(
                    "{}: {j:.3} J{}, CO2e {}",
                    c.name(),
                    if est { " ESTIMATED" } else { "" },
                    co2e.text(j)
                )
            })
            .collect()
    }

    /// A one-line summary for stderr.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} samples in {:.3} s ({:.1}/s), {} late timer ticks, {} coalesced (writer behind), {} wraps corrected",
            self.samples,
            self.wall_s,
            if self.wall_s > 0.0 { self.samples as f64 / self.wall_s } else { 0.0 },
            self.late_ticks,
            self.coalesced,
            self.wraps
        );
        if !self.errors.is_empty() {
            s.push_str(&format!(
                ", {} read errors (first: {})",
                self.errors.len(),
                self.errors[0]
            ));
        }
        s
    }

    /// One warning per counter that held the same value in at least half the readings while
    /// it did change (a counter that never moved is another matter): its hardware updates it
    /// less often than the rate asked, so the rows repeat values. Says how often it changed
    /// and the rate that gives each row a new value.
    pub fn repeat_warnings(&self, counters: &[CounterSpec]) -> Vec<String> {
        let mut out = Vec::new();
        for (c, &unchanged) in counters.iter().zip(&self.unchanged_reads) {
            let changes = self.reads.saturating_sub(unchanged);
            if self.reads == 0 || changes < 2 || unchanged * 2 <= self.reads {
                continue;
            }
            let period_ms = self.wall_s * 1e3 / changes as f64;
            // A rate no faster than the updates (never below record's 0.001 Hz floor).
            let hz = 1000.0 / period_ms;
            let freq = if hz >= 1.0 {
                format!("{}", hz.floor())
            } else {
                format!(
                    "{}",
                    ((hz * 1000.0).floor() / 1000.0).max(*FREQ_RANGE_HZ.start())
                )
            };
            out.push(format!(
                "{:.0} % of the readings of {} repeat the previous value: its counter changed about every {period_ms:.1} ms ({changes} changes in {:.1} s), less often than asked; --freq {freq} or less gives each row a new value",
                100.0 * unchanged as f64 / self.reads as f64,
                c.name(),
                self.wall_s,
            ));
        }
        out
    }
}

/// The sampling rates the loop keeps (Hz): from one sample in about 17 minutes to one a
/// millisecond, the RAPL counters' own update period.
pub const FREQ_RANGE_HZ: std::ops::RangeInclusive<f64> = 0.001..=1000.0;

/// Whether `hz` is a rate the loop keeps ([`FREQ_RANGE_HZ`]).
pub fn check_freq(hz: f64) -> Result<(), SamplerError> {
    if hz.is_finite() && FREQ_RANGE_HZ.contains(&hz) {
        Ok(())
    } else {
        Err(SamplerError::BadFrequency(hz))
    }
}

/// Errors of a sampling run.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error(transparent)]
    Energy(#[from] EnergyError),
    /// The io::Error is the source, so a closed pipe is found in the error chain.
    #[error("writing samples failed (check free space and the output path)")]
    Write(#[source] io::Error),
    #[error("--freq must be between 0.001 and 1000 Hz (got {0})")]
    BadFrequency(f64),
    #[error("timer: {0}")]
    Timer(io::Error),
    #[error("stopped after {0} consecutive read errors; last: {1}")]
    TooManyErrors(u32, String),
}

fn ns_to_timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// A periodic CLOCK_MONOTONIC timerfd armed at an absolute first deadline.
struct Ticker {
    fd: std::os::fd::OwnedFd,
}

impl Ticker {
    fn new(first_deadline_ns: u64, period_ns: u64) -> io::Result<Self> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscall; the fd is owned below.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and valid.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let spec = libc::itimerspec {
            it_interval: ns_to_timespec(period_ns),
            it_value: ns_to_timespec(first_deadline_ns),
        };
        use std::os::fd::AsRawFd;
        // SAFETY: valid fd and itimerspec.
        let r = unsafe {
            libc::timerfd_settime(
                fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Ticker { fd })
    }

    /// Waits for the next expiration and returns how many expirations passed (0 when
    /// cancelled first). With `cancel` it blocks in one `poll(2)` on the timer and the cancel
    /// flag; with `None` in `read` alone: one syscall per tick, used when ticks come often
    /// enough ([`CANCEL_CHECK_NS`]) that checking the flag after each is prompt.
    fn wait(&self, cancel: Option<&Cancel>) -> io::Result<u64> {
        use std::os::fd::AsRawFd;
        if let Some(cancel) = cancel {
            if !cancel.wait_readable(&self.fd, None)? {
                return Ok(0);
            }
        }
        let mut buf = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        if n != 8 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted
                || e.kind() == io::ErrorKind::WouldBlock
            {
                Ok(0)
            } else {
                Err(e)
            };
        }
        Ok(u64::from_ne_bytes(buf))
    }
}

/// Waits between readings up to this long check the cancel flag after each reading only; longer
/// ones also wake on it, so a cancel is seen within this time at any rate.
const CANCEL_CHECK_NS: u64 = 100_000_000;

const MAX_CONSECUTIVE_ERRORS: u32 = 50;
const MAX_ERRORS_KEPT: usize = 5;

/// Where samples go. Runs on the writer thread.
pub trait SampleSink: Send + 'static {
    /// Takes one sample.
    fn consume(&mut self, sample: &Sample) -> io::Result<()>;
    /// Called once after the last sample (flush here).
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs the sampling loop on the current thread and hands each [`Sample`] to `sink` on a second
/// thread. Returns when `cfg.duration` has elapsed or `cancel` is set; a final reading is
/// always taken and delivered so the energy up to the stop is accounted for.
pub fn run_sampler<S: SampleSink>(
    mut source: Box<dyn Source>,
    cfg: &SamplerConfig,
    cancel: &Cancel,
    sink: S,
) -> Result<(SamplerStats, S), SamplerError> {
    check_freq(cfg.freq_hz)?;
    let specs = source.counters().to_vec();
    let n = specs.len();
    let plan = ReadPlan::new(cfg, &specs);
    // A source on its own clock (eBPF's kernel timer) ticks as often as this loop reads.
    source.set_rate_hz(1e9 / plan.period_ns as f64)?;
    let mut reader = Reader::prime(source, &specs)?;

    let (mut batches, writer) = Batches::start(sink, cfg)?;
    let start_wall = Instant::now();
    let start_ns = mono_ns() + plan.period_ns;
    let mut clock = ReadClock {
        ticker: match cfg.pacing {
            Pacing::Timerfd => {
                Some(Ticker::new(start_ns, plan.period_ns).map_err(SamplerError::Timer)?)
            }
            Pacing::Sleep => None,
        },
        period_ns: plan.period_ns,
        // Ticks at least every 100 ms: block in read() alone and check the flag after each.
        wake_on_cancel: (plan.period_ns > CANCEL_CHECK_NS).then_some(cancel),
        read_index: 0,
        prev_index: 0,
    };
    let mut stats = SamplerStats {
        unchanged_reads: vec![0; n],
        energy_j: vec![0.0; n],
        ..SamplerStats::default()
    };
    let mut carry = vec![0f64; n];
    let mut carry_wrapped = false;
    let writer_failed = loop {
        let stopping = cancel.is_set() || plan.all_read(clock.read_index);
        if !stopping && !clock.wait(&mut stats)? {
            continue; // cancelled (or interrupted): re-check the flag
        }
        let now_ns = mono_ns();
        let unix_s = unix_now();
        if let Err(e) = reader.read(&mut stats) {
            drop(batches);
            let _ = writer.join();
            return Err(e);
        }
        for (c, d) in carry.iter_mut().zip(&reader.deltas) {
            *c += d.joules;
            if d.wrapped {
                carry_wrapped = true;
                stats.wraps += 1;
            }
        }
        // The run's last scheduled reading is the final row (no extra reading after it).
        let stopping = stopping || plan.all_read(clock.read_index);
        if !stopping && !plan.row_due(clock.prev_index, clock.read_index) {
            continue;
        }
        let sample = Sample {
            unix_s,
            mono_ns: now_ns,
            deadline_ns: start_ns + clock.read_index.saturating_sub(1) * plan.period_ns,
            joules: std::mem::replace(&mut carry, vec![0f64; n]),
            wrapped: std::mem::take(&mut carry_wrapped),
        };
        if stopping {
            break batches.finish(sample, &mut stats).is_err();
        }
        if batches.push(sample, &mut stats).is_err() {
            break true;
        }
    };
    stats.wall_s = start_wall.elapsed().as_secs_f64();
    let (res, sink) = writer
        .join()
        .map_err(|_| SamplerError::Write(io::Error::other("writer thread panicked")))?;
    match res {
        Err(e) => Err(SamplerError::Write(e)),
        Ok(()) if writer_failed => Err(SamplerError::Write(io::Error::other("writer stopped"))),
        Ok(()) => Ok((stats, sink)),
    }
}

/// The counters as the loop reads them: raw values through the accumulator into joules per
/// counter, with the count of failed readings in a row.
struct Reader {
    source: Box<dyn Source>,
    acc: Accumulator,
    raw: Vec<u64>,
    /// The last reading's joules per counter (zero after a failed reading).
    deltas: Vec<CounterDelta>,
    consecutive_errors: u32,
}

impl Reader {
    /// Takes the first reading, which only primes the accumulator.
    fn prime(mut source: Box<dyn Source>, specs: &[CounterSpec]) -> Result<Reader, SamplerError> {
        let n = specs.len();
        let mut acc = Accumulator::new(specs);
        let mut raw = vec![0u64; n];
        let mut deltas = vec![
            CounterDelta {
                joules: 0.0,
                wrapped: false
            };
            n
        ];
        source.read_raw(&mut raw)?;
        acc.update(&raw, &mut deltas)?;
        Ok(Reader {
            source,
            acc,
            raw,
            deltas,
            consecutive_errors: 0,
        })
    }

    /// One reading into `deltas`, counted in `stats` with the source's failed counters. A
    /// failed reading is kept in `stats.errors` and adds no energy (the energy since the last
    /// good one comes with the next); [`MAX_CONSECUTIVE_ERRORS`] in a row end the run.
    fn read(&mut self, stats: &mut SamplerStats) -> Result<(), SamplerError> {
        let keep = |stats: &mut SamplerStats, e: String| {
            if stats.errors.len() < MAX_ERRORS_KEPT {
                stats.errors.push(e);
            }
        };
        match self
            .source
            .read_raw(&mut self.raw)
            .and_then(|_| self.acc.update(&self.raw, &mut self.deltas))
        {
            Ok(()) => {
                self.consecutive_errors = 0;
                stats.count_changes(&self.deltas);
                for e in self.source.take_counter_errors() {
                    keep(stats, e);
                }
                Ok(())
            }
            Err(e) => {
                // The deltas still hold the previous reading's.
                for d in self.deltas.iter_mut() {
                    *d = CounterDelta {
                        joules: 0.0,
                        wrapped: false,
                    };
                }
                self.consecutive_errors += 1;
                keep(stats, e.to_string());
                if self.consecutive_errors >= MAX_CONSECUTIVE_ERRORS {
                    return Err(SamplerError::TooManyErrors(
                        self.consecutive_errors,
                        e.to_string(),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// How often the sampler reads the counters: a row every `1 / freq_hz` s, read in as many
/// equal steps as it takes for no counter to wrap twice between readings.
struct ReadPlan {
    reads_per_row: u64,
    period_ns: u64,
    /// Readings in the run, for a run of fixed duration.
    total_reads: Option<u64>,
}

impl ReadPlan {
    fn new(cfg: &SamplerConfig, specs: &[CounterSpec]) -> ReadPlan {
        let row_period = 1.0 / cfg.freq_hz;
        let safe = specs
            .iter()
            .map(max_safe_period)
            .fold(f64::INFINITY, f64::min);
        let reads_per_row = (row_period / safe).ceil().max(1.0) as u64;
        ReadPlan {
            reads_per_row,
            period_ns: ((row_period / reads_per_row as f64) * 1e9).round().max(1.0) as u64,
            total_reads: cfg
                .duration
                .map(|d| ((d.as_secs_f64() / row_period).round() as u64).max(1) * reads_per_row),
        }
    }

    /// Whether reading `read_index` was the run's last scheduled one.
    fn all_read(&self, read_index: u64) -> bool {
        self.total_reads.is_some_and(|t| read_index >= t)
    }

    /// A row is due when the reading crossed a row boundary (late ticks may jump past one).
    fn row_due(&self, prev_index: u64, read_index: u64) -> bool {
        read_index / self.reads_per_row != prev_index / self.reads_per_row
    }
}

/// The sampler's pace: the deadline index of the last reading and how to wait for the next.
struct ReadClock<'a> {
    ticker: Option<Ticker>,
    period_ns: u64,
    wake_on_cancel: Option<&'a Cancel>,
    read_index: u64,
    prev_index: u64,
}

impl ReadClock<'_> {
    /// Waits for the next reading's deadline and advances to it (late ticks counted in
    /// `stats`); `false` when woken by the cancel flag (or interrupted) without advancing.
    fn wait(&mut self, stats: &mut SamplerStats) -> Result<bool, SamplerError> {
        let steps = match (&self.ticker, self.wake_on_cancel) {
            (Some(t), wake) => {
                let expirations = t.wait(wake).map_err(SamplerError::Timer)?;
                if expirations == 0 {
                    return Ok(false);
                }
                stats.late_ticks += expirations - 1;
                expirations
            }
            (None, Some(cancel)) => {
                if cancel.sleep(Duration::from_nanos(self.period_ns)) {
                    return Ok(false); // cancelled: the final reading follows
                }
                1
            }
            (None, None) => {
                std::thread::sleep(Duration::from_nanos(self.period_ns));
                1
            }
        };
        self.prev_index = self.read_index;
        self.read_index += steps;
        Ok(true)
    }
}

/// The writer thread stopped taking samples.
struct WriterGone;

/// Samples on their way to the writer thread, in batches of about 50 ms so the writer wakes 20
/// times a second, not once per sample: in a VM each cross-thread wake-up costs more CPU than
/// the reading itself.
struct Batches<'a> {
    tx: SyncSender<Vec<Sample>>,
    batch: Vec<Sample>,
    batch_len: usize,
    max_batch: usize,
    progress: &'a Sink<RecordProgress>,
}

type Writer<S> = std::thread::JoinHandle<(io::Result<()>, S)>;

impl<'a> Batches<'a> {
    /// Starts the writer thread that hands every sample to `sink`, then finishes it.
    fn start<S: SampleSink>(
        mut sink: S,
        cfg: &'a SamplerConfig,
    ) -> Result<(Batches<'a>, Writer<S>), SamplerError> {
        let batch_len = ((cfg.freq_hz / 20.0).round() as usize).max(1);
        let (tx, rx) = sync_channel::<Vec<Sample>>((cfg.queue_capacity / batch_len).max(2));
        let writer = std::thread::Builder::new()
            .name("wattio-writer".into())
            .spawn(move || -> (io::Result<()>, S) {
                for batch in rx {
                    for s in &batch {
                        if let Err(e) = sink.consume(s) {
                            return (Err(e), sink);
                        }
                    }
                }
                let r = sink.finish();
                (r, sink)
            })
            .map_err(SamplerError::Write)?;
        let batches = Batches {
            tx,
            batch: Vec::with_capacity(batch_len * 4),
            batch_len,
            max_batch: batch_len * 4,
            progress: &cfg.progress,
        };
        Ok((batches, writer))
    }

    /// Queues `sample` and hands a full batch to the writer without blocking (a batch the
    /// writer has no room for is retried at the next sample).
    fn push(&mut self, sample: Sample, stats: &mut SamplerStats) -> Result<(), WriterGone> {
        if self.batch.len() >= self.max_batch {
            // The writer is behind and the batch is at its cap: merge into the last sample
            // rather than drop energy.
            let last = self.batch.last_mut().expect("max_batch > 0");
            for (l, j) in last.joules.iter_mut().zip(&sample.joules) {
                *l += j;
            }
            last.wrapped |= sample.wrapped;
            last.unix_s = sample.unix_s;
            last.mono_ns = sample.mono_ns;
            last.deadline_ns = sample.deadline_ns;
            stats.coalesced += 1;
        } else {
            self.batch.push(sample);
        }
        if self.batch.len() < self.batch_len {
            return Ok(());
        }
        let k = self.batch.len() as u64;
        match self.tx.try_send(std::mem::take(&mut self.batch)) {
            Ok(()) => {
                stats.samples += k;
                self.progress.tell(&RecordProgress {
                    samples: stats.samples,
                });
                Ok(())
            }
            Err(TrySendError::Full(b)) => {
                self.batch = b;
                Ok(())
            }
            Err(TrySendError::Disconnected(_)) => Err(WriterGone),
        }
    }

    /// Hands over the last samples, blocking: they must get through. Closes the channel, so
    /// the writer finishes.
    fn finish(mut self, sample: Sample, stats: &mut SamplerStats) -> Result<(), WriterGone> {
        self.batch.push(sample);
        let k = self.batch.len() as u64;
        self.tx
            .send(std::mem::take(&mut self.batch))
            .map_err(|_| WriterGone)?;
        stats.samples += k;
        Ok(())
    }
}

/// Writes samples as rows (CSV or JSON lines), flushing at least once a second and at the end.
pub struct RowSink<W: Write + Send + 'static> {
    fmt: RowFormatter,
    out: io::BufWriter<W>,
    last_flush: Instant,
    attribution: Option<crate::attribute::RecordAttribution>,
    n: usize,
}

impl<W: Write + Send + 'static> RowSink<W> {
    /// A sink writing `format` rows for `source`'s counters into `out`; writes the header now.
    pub fn new(source: &dyn Source, format: RecordFormat, out: W) -> io::Result<Self> {
        Self::with_attribution(source, format, out, None)
    }

    /// As [`RowSink::new`], adding the per-entry rows of `attribution` (`record --by`).
    pub fn with_attribution(
        source: &dyn Source,
        format: RecordFormat,
        out: W,
        attribution: Option<crate::attribute::RecordAttribution>,
    ) -> io::Result<Self> {
        let mut fmt = RowFormatter::for_source(format, source);
        if let Some(a) = &attribution {
            let workload = matches!(
                a.by(),
                wattio_energy::attribution::By::Container | wattio_energy::attribution::By::Pod
            );
            fmt = fmt.with_entity_columns(source.provenance(), workload);
        }
        let mut out = io::BufWriter::with_capacity(128 * 1024, out);
        fmt.write_header(&mut out)?;
        out.flush()?;
        Ok(RowSink {
            fmt,
            out,
            last_flush: Instant::now(),
            attribution,
            n: source.counters().len(),
        })
    }

    fn attribution_rows(
        &mut self,
        unix_s: f64,
        mono: u64,
        joules: &[f64],
        last: bool,
    ) -> io::Result<()> {
        if let Some(a) = &mut self.attribution {
            if let Some(rows) = a.sample(mono, joules, last)? {
                for r in &rows {
                    self.fmt.write_entity_row(&mut self.out, unix_s, r)?;
                }
            }
        }
        Ok(())
    }
}

impl<W: Write + Send + 'static> SampleSink for RowSink<W> {
    fn consume(&mut self, s: &Sample) -> io::Result<()> {
        self.fmt.write_sample(&mut self.out, s.unix_s, &s.joules)?;
        self.attribution_rows(s.unix_s, s.mono_ns, &s.joules, false)?;
        if self.last_flush.elapsed() >= Duration::from_secs(1) {
            self.out.flush()?;
            self.last_flush = Instant::now();
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        // The last interval, however short, so the rows add up to the counters' energy.
        let zeros = vec![0.0; self.n];
        self.attribution_rows(unix_now(), mono_ns(), &zeros, true)?;
        self.out.flush()
    }
}

/// Samples `source` into `out` as CSV or JSON lines, with the per-entry rows of `attribution`
/// when given (`record --by`).
pub fn record_rows<W: Write + Send + 'static>(
    source: Box<dyn Source>,
    cfg: &SamplerConfig,
    cancel: &Cancel,
    format: RecordFormat,
    out: W,
    attribution: Option<crate::attribute::RecordAttribution>,
) -> Result<SamplerStats, SamplerError> {
    let sink = RowSink::with_attribution(source.as_ref(), format, out, attribution)
        .map_err(SamplerError::Write)?;
    run_sampler(source, cfg, cancel, sink).map(|(stats, _)| stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattio_energy::{Domain, Wrap};

    fn counter(domain: Domain) -> CounterSpec {
        CounterSpec {
            socket: 0,
            domain,
            unit_j: 1e-6,
            wrap: Wrap::AtMax(u64::MAX),
            origin: "test".into(),
        }
    }

    #[test]
    fn repeats_are_warned_only_for_a_moving_counter_read_mostly_unchanged() {
        let stats = SamplerStats {
            wall_s: 2.0,
            reads: 2000,
            // package: changed 400 times (every 5 ms); dram: never; core: changed in 1200.
            unchanged_reads: vec![1600, 2000, 800],
            ..SamplerStats::default()
        };
        let w = stats.repeat_warnings(&[
            counter(Domain::Package),
            counter(Domain::Dram),
            counter(Domain::Core),
        ]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("80 % of the readings of socket 0 package"),
            "{}",
            w[0]
        );
        assert!(
            w[0].contains("about every 5.0 ms (400 changes in 2.0 s)"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("--freq 200 or less"), "{}", w[0]);
        assert!(SamplerStats::default()
            .repeat_warnings(&[counter(Domain::Package)])
            .is_empty());
    }

    /// A counter that advances 1000 µJ a reading and whose fourth reading fails.
    struct Flaky {
        specs: Vec<CounterSpec>,
        provenance: wattio_energy::Provenance,
        reads: u64,
        last_good: std::sync::Arc<std::sync::atomic::AtomicU64>,
    }

    impl Source for Flaky {
        fn provenance(&self) -> &wattio_energy::Provenance {
            &self.provenance
        }
        fn counters(&self) -> &[CounterSpec] {
            &self.specs
        }
        fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
            self.reads += 1;
            if self.reads == 4 {
                return Err(EnergyError::Io {
                    path: "/flaky".into(),
                    err: io::Error::other("read failed once"),
                });
            }
            out[0] = self.reads * 1000;
            self.last_good
                .store(out[0], std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
    }

    struct Total(f64);

    impl SampleSink for Total {
        fn consume(&mut self, s: &Sample) -> io::Result<()> {
            self.0 += s.joules[0];
            Ok(())
        }
    }

    #[test]
    fn a_failed_reading_adds_no_energy_and_loses_none() {
        let last_good = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let source = Flaky {
            specs: vec![counter(Domain::Package)],
            provenance: wattio_energy::Provenance::measured(wattio_energy::Mechanism::Powercap),
            reads: 0,
            last_good: last_good.clone(),
        };
        let cfg = SamplerConfig {
            freq_hz: 1000.0,
            duration: Some(Duration::from_millis(10)),
            ..SamplerConfig::default()
        };
        let (stats, total) =
            run_sampler(Box::new(source), &cfg, &Cancel::new().unwrap(), Total(0.0)).unwrap();
        assert_eq!(stats.errors.len(), 1, "{:?}", stats.errors);
        // Everything from the priming reading (1000 µJ) to the last good one, once.
        let truth = (last_good.load(std::sync::atomic::Ordering::Relaxed) - 1000) as f64 * 1e-6;
        assert!(
            (total.0 - truth).abs() < 1e-9,
            "{} J against {truth} J",
            total.0
        );
    }
}
