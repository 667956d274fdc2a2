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
use std::sync::mpsc::{sync_channel, TrySendError};
use std::time::{Duration, Instant};
use wattio_energy::{max_safe_period, Accumulator, CounterDelta, EnergyError, Source};
use wattio_progress::{Cancel, Sink};

use crate::meter::unix_now;
use crate::sink::{RecordFormat, RowFormatter};

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
}

impl SamplerStats {
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
}

/// Errors of a sampling run.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("{0}")]
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

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
    mut sink: S,
) -> Result<(SamplerStats, S), SamplerError> {
    if !(cfg.freq_hz.is_finite() && (0.001..=1000.0).contains(&cfg.freq_hz)) {
        return Err(SamplerError::BadFrequency(cfg.freq_hz));
    }
    let specs = source.counters().to_vec();
    let n = specs.len();
    let row_period = 1.0 / cfg.freq_hz;
    let safe = specs
        .iter()
        .map(max_safe_period)
        .fold(f64::INFINITY, f64::min);
    let reads_per_row = (row_period / safe).ceil().max(1.0) as u64;
    let period_ns = ((row_period / reads_per_row as f64) * 1e9).round().max(1.0) as u64;

    // A source on its own clock (eBPF's kernel timer) ticks as often as this loop reads.
    source.set_rate_hz(1e9 / period_ns as f64)?;
    let mut acc = Accumulator::new(&specs);
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

    // Samples travel in batches of about 50 ms so the writer wakes 20 times a second, not once
    // per sample: in a VM each cross-thread wake-up costs more CPU than the reading itself.
    let batch_len = ((cfg.freq_hz / 20.0).round() as usize).max(1);
    let max_batch = batch_len * 4;
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

    let start_wall = Instant::now();
    let start_ns = mono_ns() + period_ns;
    let total_reads = cfg
        .duration
        .map(|d| ((d.as_secs_f64() / row_period).round() as u64).max(1) * reads_per_row);
    let ticker = match cfg.pacing {
        Pacing::Timerfd => Some(Ticker::new(start_ns, period_ns).map_err(SamplerError::Timer)?),
        Pacing::Sleep => None,
    };

    // Ticks at least every 100 ms: block in read() alone and check the cancel flag after each.
    let wake_on_cancel = (period_ns > CANCEL_CHECK_NS).then_some(cancel);
    let mut stats = SamplerStats::default();
    let mut carry = vec![0f64; n];
    let mut carry_wrapped = false;
    let mut batch: Vec<Sample> = Vec::with_capacity(max_batch);
    let mut read_index: u64 = 0; // deadline index of the last reading
    let mut prev_index: u64 = 0;
    let mut consecutive_errors = 0u32;
    let mut writer_failed = false;
    loop {
        let stopping = cancel.is_set() || total_reads.is_some_and(|t| read_index >= t);
        if !stopping {
            match &ticker {
                Some(t) => {
                    let exp = t.wait(wake_on_cancel).map_err(SamplerError::Timer)?;
                    if exp == 0 {
                        continue; // cancelled (or interrupted): re-check the flag
                    }
                    stats.late_ticks += exp - 1;
                    prev_index = read_index;
                    read_index += exp;
                }
                None if wake_on_cancel.is_some() => {
                    if cancel.sleep(Duration::from_nanos(period_ns)) {
                        continue; // cancelled: the final reading follows
                    }
                    prev_index = read_index;
                    read_index += 1;
                }
                None => {
                    std::thread::sleep(Duration::from_nanos(period_ns));
                    prev_index = read_index;
                    read_index += 1;
                }
            }
        }
        let now_ns = mono_ns();
        let unix_s = unix_now();
        match source
            .read_raw(&mut raw)
            .and_then(|_| acc.update(&raw, &mut deltas))
        {
            Ok(()) => consecutive_errors = 0,
            Err(e) => {
                consecutive_errors += 1;
                if stats.errors.len() < MAX_ERRORS_KEPT {
                    stats.errors.push(e.to_string());
                }
                if consecutive_errors >= MAX_CONSECUTIVE_ERRORS {
                    drop(tx);
                    let _ = writer.join();
                    return Err(SamplerError::TooManyErrors(
                        consecutive_errors,
                        e.to_string(),
                    ));
                }
            }
        }
        for (c, d) in carry.iter_mut().zip(&deltas) {
            *c += d.joules;
            if d.wrapped {
                carry_wrapped = true;
                stats.wraps += 1;
            }
        }
        // A row is due when this reading crossed a row boundary (late ticks may jump past one).
        // The run's last scheduled reading is the final row (no extra reading after it).
        let stopping = stopping || total_reads.is_some_and(|t| read_index >= t);
        let row_due = stopping || read_index / reads_per_row != prev_index / reads_per_row;
        if row_due {
            let sample = Sample {
                unix_s,
                mono_ns: now_ns,
                deadline_ns: start_ns + read_index.saturating_sub(1) * period_ns,
                joules: std::mem::replace(&mut carry, vec![0f64; n]),
                wrapped: std::mem::take(&mut carry_wrapped),
            };
            if stopping {
                // The last samples must get through: block.
                batch.push(sample);
                let k = batch.len() as u64;
                if tx.send(std::mem::take(&mut batch)).is_ok() {
                    stats.samples += k;
                } else {
                    writer_failed = true;
                }
                break;
            }
            if batch.len() >= max_batch {
                // The writer is behind and the batch is at its cap: merge into the last sample
                // rather than drop energy.
                let last = batch.last_mut().expect("max_batch > 0");
                for (l, j) in last.joules.iter_mut().zip(&sample.joules) {
                    *l += j;
                }
                last.wrapped |= sample.wrapped;
                last.unix_s = sample.unix_s;
                last.mono_ns = sample.mono_ns;
                last.deadline_ns = sample.deadline_ns;
                stats.coalesced += 1;
            } else {
                batch.push(sample);
            }
            if batch.len() >= batch_len {
                let k = batch.len() as u64;
                match tx.try_send(std::mem::take(&mut batch)) {
                    Ok(()) => {
                        stats.samples += k;
                        cfg.progress.tell(&RecordProgress {
                            samples: stats.samples,
                        });
                    }
                    Err(TrySendError::Full(b)) => batch = b, // retried at the next sample
                    Err(TrySendError::Disconnected(_)) => {
                        writer_failed = true;
                        break;
                    }
                }
            }
        }
    }
    drop(tx);
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
        if attribution.is_some() {
            fmt = fmt.with_entity_columns(source.provenance());
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
