//! Slow meters polled on their own thread, so they never delay the sampling loop.
//!
//! A BMC answers a DCMI power reading in tens of milliseconds to seconds and updates it once per
//! averaging period; an hwmon file may run an ACPI method or a firmware message on each read. A
//! [`ReadingSource`] is such a meter: each poll may block (up to its own deadline) and returns
//! [`Reading`]s of any kind. [`PolledSource`] polls it on a thread of its own, integrates each
//! channel's readings ([`Integrator`]) and publishes the running joules as counters in whole
//! microjoules that the sampling loop reads with one atomic load each: a [`Source`] like RAPL's,
//! which every command reads without knowing the difference.

use crate::error::EnergyError;
use crate::reading::{Channel, Integrator, LateTiming, Reading, ReadingKind};
use crate::types::{CounterSpec, Provenance, Wrap};
use crate::Source;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A meter read by polling: slow, possibly remote, possibly late.
pub trait ReadingSource: Send + 'static {
    /// The mechanism and how its figures are made (the whole source's).
    fn provenance(&self) -> &Provenance;
    /// Channel `i`'s provenance (by default the source's).
    fn channel_provenance(&self, i: usize) -> Provenance {
        let _ = i;
        self.provenance().clone()
    }
    /// Its channels, in the order readings name them.
    fn channels(&self) -> &[Channel];
    /// How often to poll it: the meter's own update period, or the least a meter tolerates.
    fn poll_period(&self) -> Duration;
    /// The longest one poll may take before it is given up (its answers' deadline).
    fn poll_deadline(&self) -> Duration;
    /// Reads every channel once. May block, never past [`ReadingSource::poll_deadline`]. An
    /// error fails the whole poll; a source of several devices that kept reading past one
    /// failed channel returns the others and says why in [`ReadingSource::take_channel_errors`].
    fn poll(&mut self) -> Result<Vec<Reading>, EnergyError>;
    /// The channels the last poll went past, and why.
    fn take_channel_errors(&mut self) -> Vec<String> {
        Vec::new()
    }
    /// How old a channel's newest reading may grow before it is reported stale (by default
    /// three polls missed, each as slow as its deadline allows).
    fn stale_after(&self) -> Option<Duration> {
        None
    }
    /// The channels whose next reading must start afresh (a stale reading was refused): their
    /// integrators are primed again, so no energy is made up for the time between.
    fn take_gaps(&mut self) -> Vec<usize> {
        Vec::new()
    }
}

/// Each channel's published total and state, shared between the poller and the readers.
struct Shared {
    /// Joules integrated so far per channel, in whole microjoules.
    total_uj: Vec<AtomicU64>,
    /// CLOCK_MONOTONIC ns of the last poll that gave a reading of each channel.
    last_ok_ns: Vec<AtomicU64>,
    /// Each channel is reported stale once per episode, not at every read.
    stale_reported: Vec<AtomicBool>,
    /// Each channel's running joules at the instants its readings were measured.
    history: Vec<Mutex<History>>,
    /// How old each channel's newest reading was when it arrived, ns.
    newest_age_ns: Vec<AtomicU64>,
    errors: Mutex<Vec<String>>,
    /// A power reading measured longer than this after the one before starts afresh: no
    /// energy is made up for a meter that stopped answering (0 until known).
    max_gap_ns: AtomicU64,
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Shared {
    fn push_error(&self, e: String) {
        if let Ok(mut errors) = self.errors.lock() {
            // One of each while it repeats: a meter that keeps failing is one problem.
            if errors.len() < 64 && !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
}

/// Microjoules per counter step of a polled channel.
const UJ: f64 = 1e-6;

/// The points a channel's history keeps before it thins them (about 14 minutes at 10 Hz;
/// thinned, it spans the whole run at half the resolution each time it fills).
const HISTORY_POINTS: usize = 8192;

/// A channel's running joules at the instants its readings were measured, oldest first: the
/// curve [`Source::energy_between`] reads a window off, placed where the meter measured it.
#[derive(Debug, Default)]
struct History {
    points: Vec<(u64, f64)>,
}

impl History {
    fn push(&mut self, at_ns: u64, total_j: f64) {
        if self.points.last().is_some_and(|&(t, _)| at_ns < t) {
            return;
        }
        if self.points.len() >= HISTORY_POINTS {
            // Every other point, the newest kept: bounded memory over any run.
            let newest = self.points[self.points.len() - 1];
            let mut i = 0;
            self.points.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            if self.points.last() != Some(&newest) {
                self.points.push(newest);
            }
        }
        self.points.push((at_ns, total_j));
    }

    /// The running joules at `t_ns`, linear between the readings around it, and how far off
    /// that may be: half the step's length times the most its power differs from the steps
    /// beside it (0 on a reading's instant, or where the power held).
    fn at(&self, t_ns: u64) -> Option<(f64, f64)> {
        let (&(first_ns, _), &(last_ns, _)) = (self.points.first()?, self.points.last()?);
        if t_ns < first_ns || t_ns > last_ns {
            return None;
        }
        let after = self.points.partition_point(|&(t, _)| t < t_ns);
        let (t1, j1) = self.points[after];
        if after == 0 || t1 == t_ns {
            return Some((j1, 0.0));
        }
        let (t0, j0) = self.points[after - 1];
        let step_s = (t1 - t0) as f64 / 1e9;
        let power = |k: usize| {
            let ((ta, ja), (tb, jb)) = (*self.points.get(k.checked_sub(1)?)?, *self.points.get(k)?);
            (tb > ta).then(|| (jb - ja) / ((tb - ta) as f64 / 1e9))
        };
        let here = power(after).unwrap_or(0.0);
        let spread = [power(after - 1), power(after + 1)]
            .into_iter()
            .flatten()
            .map(|p| (p - here).abs())
            // Below a microwatt the difference is the arithmetic's, not the meter's.
            .filter(|&d| d >= 1e-6)
            .fold(0.0, f64::max);
        let j = j0 + (j1 - j0) * (t_ns - t0) as f64 / (t1 - t0) as f64;
        Some((j, step_s * spread / 2.0))
    }
}

/// A [`ReadingSource`] behind a polling thread, read as a [`Source`] of counters in microjoules.
pub struct PolledSource {
    provenance: Provenance,
    provenances: Vec<Provenance>,
    specs: Vec<CounterSpec>,
    shared: Arc<Shared>,
    /// A channel whose newest reading is older than this is reported stale.
    max_age_ns: u64,
    /// Each channel's averaging (its window, or the poll period) and resolutions (W, J).
    timings: Vec<(Duration, f64, f64)>,
    mechanism_name: &'static str,
}

impl PolledSource {
    /// Takes a first reading here (so a meter that cannot answer is refused at once, with its
    /// reason), then polls on a thread named after the mechanism.
    pub fn start(mut meter: Box<dyn ReadingSource>) -> Result<PolledSource, EnergyError> {
        let channels = meter.channels().to_vec();
        if channels.is_empty() {
            return Err(EnergyError::Unusable {
                mechanism: meter.provenance().mechanism,
                reason: "it has no channel to read".into(),
                fix: "nothing to read here".into(),
            });
        }
        let mut integrators: Vec<Integrator> =
            channels.iter().cloned().map(Integrator::new).collect();
        let first = meter.poll()?;
        let now = crate::mono_ns();
        let n = channels.len();
        let shared = Arc::new(Shared {
            total_uj: (0..n).map(|_| AtomicU64::new(0)).collect(),
            last_ok_ns: (0..n).map(|_| AtomicU64::new(now)).collect(),
            stale_reported: (0..n).map(|_| AtomicBool::new(false)).collect(),
            history: (0..n).map(|_| Mutex::new(History::default())).collect(),
            newest_age_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
            max_gap_ns: AtomicU64::new(0),
            errors: Mutex::new(Vec::new()),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        });
        let mut totals_j = vec![0.0; n];
        integrate(&first, &mut integrators, &mut totals_j, &shared);
        let provenance = meter.provenance().clone();
        let provenances = (0..n).map(|i| meter.channel_provenance(i)).collect();
        let specs = channels
            .iter()
            .map(|c| CounterSpec {
                socket: c.index,
                domain: c.scope,
                unit_j: UJ,
                wrap: Wrap::AtMax(u64::MAX),
                origin: c.origin.clone(),
            })
            .collect();
        let period = meter.poll_period();
        let timings = channels
            .iter()
            .map(|c| {
                (
                    c.update_period.unwrap_or(period),
                    c.resolution_w,
                    c.resolution_j,
                )
            })
            .collect();
        // Three polls missed, each as slow as its deadline allows, before a reading is stale.
        let max_age = meter
            .stale_after()
            .unwrap_or(3 * (period + meter.poll_deadline()));
        shared
            .max_gap_ns
            .store(max_age.as_nanos() as u64, Ordering::Relaxed);
        let mechanism_name = provenance.mechanism.as_str();
        let poller_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("wattio-{mechanism_name}"))
            .spawn(move || poll_loop(meter, integrators, totals_j, period, &poller_shared))
            .map_err(|e| {
                EnergyError::Invalid(format!(
                    "cannot start the {mechanism_name} poller thread: {e}"
                ))
            })?;
        Ok(PolledSource {
            provenance,
            provenances,
            specs,
            shared,
            max_age_ns: max_age.as_nanos() as u64,
            timings,
            mechanism_name,
        })
    }
}

/// Adds each reading's energy to its channel's total and publishes it.
fn integrate(
    readings: &[Reading],
    integrators: &mut [Integrator],
    totals_j: &mut [f64],
    shared: &Shared,
) {
    for r in readings {
        let Some(integrator) = integrators.get_mut(r.channel) else {
            shared.push_error(format!(
                "a reading of channel {} that does not exist",
                r.channel
            ));
            continue;
        };
        // A counter's difference spans a gap truly; a power held over it would be made up.
        let max_gap = shared.max_gap_ns.load(Ordering::Relaxed);
        let gap_ns = integrator
            .last_measured_ns()
            .map_or(0, |t| r.measured_ns.saturating_sub(t));
        if max_gap > 0 && gap_ns > max_gap && integrator.channel().kind != ReadingKind::Counter {
            shared.push_error(format!(
                "{}: no reading for {:.1} s; the energy of that time is missing",
                integrator.channel().origin,
                gap_ns as f64 / 1e9
            ));
            *integrator = Integrator::new(integrator.channel().clone());
        }
        match integrator.add(r) {
            Ok(step) => {
                totals_j[r.channel] += step.central_j;
                let uj = (totals_j[r.channel] / UJ).floor() as u64;
                shared.total_uj[r.channel].store(uj, Ordering::Release);
                shared.last_ok_ns[r.channel].store(r.received_ns, Ordering::Release);
                shared.newest_age_ns[r.channel].store(r.age().as_nanos() as u64, Ordering::Relaxed);
                if let Ok(mut h) = shared.history[r.channel].lock() {
                    h.push(r.measured_ns, totals_j[r.channel]);
                }
                shared.stale_reported[r.channel].store(false, Ordering::Relaxed);
            }
            Err(e) => shared.push_error(e.to_string()),
        }
    }
}

/// Polls every `period` (from the start of one poll to the next; at once when a poll took
/// longer) until the source is dropped.
fn poll_loop(
    mut meter: Box<dyn ReadingSource>,
    mut integrators: Vec<Integrator>,
    mut totals_j: Vec<f64>,
    period: Duration,
    shared: &Shared,
) {
    let mut next = std::time::Instant::now() + period;
    loop {
        {
            let Ok(mut stop) = shared.stop.lock() else {
                return;
            };
            loop {
                if *stop {
                    return;
                }
                let now = std::time::Instant::now();
                if now >= next {
                    break;
                }
                stop = match shared.wake.wait_timeout(stop, next - now) {
                    Ok((s, _)) => s,
                    Err(_) => return,
                };
            }
        }
        next = std::time::Instant::now() + period;
        match meter.poll() {
            Ok(readings) => integrate(&readings, &mut integrators, &mut totals_j, shared),
            Err(e) => shared.push_error(e.to_string()),
        }
        for e in meter.take_channel_errors() {
            shared.push_error(e);
        }
        for i in meter.take_gaps() {
            if let Some(integrator) = integrators.get_mut(i) {
                *integrator = Integrator::new(integrator.channel().clone());
            }
        }
    }
}

impl Drop for PolledSource {
    /// Stops the poller. It is not joined: a poll under way ends by its own deadline, and
    /// waiting for it would hold up the command that is closing.
    fn drop(&mut self) {
        if let Ok(mut stop) = self.shared.stop.lock() {
            *stop = true;
        }
        self.shared.wake.notify_all();
    }
}

impl Source for PolledSource {
    fn provenance(&self) -> &Provenance {
        &self.provenance
    }
    fn counter_provenance(&self, i: usize) -> &Provenance {
        self.provenances.get(i).unwrap_or(&self.provenance)
    }
    fn counters(&self) -> &[CounterSpec] {
        &self.specs
    }
    /// One atomic load per channel: never waits for the meter.
    fn read_raw(&mut self, out: &mut [u64]) -> Result<(), EnergyError> {
        for (o, t) in out.iter_mut().zip(&self.shared.total_uj) {
            *o = t.load(Ordering::Acquire);
        }
        Ok(())
    }
    /// The meter's failed polls, and each channel whose newest reading grew stale (once per
    /// episode): the energy of that time is missing from its total.
    fn take_counter_errors(&mut self) -> Vec<String> {
        let now = crate::mono_ns();
        let mut stale = Vec::new();
        for (i, last) in self.shared.last_ok_ns.iter().enumerate() {
            let age = now.saturating_sub(last.load(Ordering::Acquire));
            if age > self.max_age_ns && !self.shared.stale_reported[i].swap(true, Ordering::Relaxed)
            {
                stale.push(format!(
                    "{} {}: no new reading for {:.1} s; its energy since then is missing",
                    self.mechanism_name,
                    self.specs[i].origin,
                    age as f64 / 1e9
                ));
            }
        }
        let mut errors = match self.shared.errors.try_lock() {
            Ok(mut e) => std::mem::take(&mut *e),
            // The poller holds it for a moment: its errors come with the next call.
            Err(_) => Vec::new(),
        };
        errors.extend(stale);
        errors
    }

    fn energy_between(&self, i: usize, t0_ns: u64, t1_ns: u64) -> Option<(f64, f64)> {
        let h = self.shared.history.get(i)?.lock().ok()?;
        let ((start, start_u), (end, end_u)) = (h.at(t0_ns)?, h.at(t1_ns)?);
        Some(((end - start).max(0.0), start_u + end_u))
    }

    fn late_timing(&self, i: usize) -> Option<LateTiming> {
        let &(averaging, resolution_w, resolution_j) = self.timings.get(i)?;
        Some(LateTiming {
            averaging,
            delay: Duration::from_nanos(self.shared.newest_age_ns[i].load(Ordering::Relaxed)),
            resolution_w,
            resolution_j,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::{ReadingKind, ReadingValue};
    use crate::types::{Domain, Mechanism};
    use std::time::Instant;

    /// A meter that takes `delay` to answer a constant window average.
    struct SlowMeter {
        provenance: Provenance,
        channels: Vec<Channel>,
        watts: f64,
        delay: Duration,
        fail_after: Option<u32>,
        polls: u32,
    }

    impl ReadingSource for SlowMeter {
        fn provenance(&self) -> &Provenance {
            &self.provenance
        }
        fn channels(&self) -> &[Channel] {
            &self.channels
        }
        fn poll_period(&self) -> Duration {
            Duration::from_millis(100)
        }
        fn poll_deadline(&self) -> Duration {
            self.delay * 2
        }
        fn poll(&mut self) -> Result<Vec<Reading>, EnergyError> {
            let asked = crate::mono_ns();
            self.polls += 1;
            if self.fail_after.is_some_and(|n| self.polls > n) {
                return Err(EnergyError::Invalid("the meter stopped answering".into()));
            }
            std::thread::sleep(self.delay);
            Ok(vec![Reading {
                channel: 0,
                value: ReadingValue::WindowAverage {
                    watts: self.watts,
                    window: Duration::from_millis(100),
                },
                measured_ns: asked,
                received_ns: crate::mono_ns(),
            }])
        }
    }

    fn meter(delay_ms: u64, fail_after: Option<u32>) -> Box<SlowMeter> {
        Box::new(SlowMeter {
            provenance: Provenance::measured(Mechanism::named("test")),
            channels: vec![Channel::of_power(
                Domain::Platform,
                0,
                ReadingKind::WindowAverage,
                "fake".into(),
            )],
            watts: 200.0,
            delay: Duration::from_millis(delay_ms),
            fail_after,
            polls: 0,
        })
    }

    #[test]
    fn reads_never_wait_for_a_slow_meter_and_its_energy_follows_its_power() {
        let t0 = Instant::now();
        let mut src = PolledSource::start(meter(300, None)).unwrap();
        assert!(
            t0.elapsed() >= Duration::from_millis(300),
            "the first reading is taken at start"
        );
        let mut raw = [0u64];
        let mut slowest = Duration::ZERO;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1500) {
            let t = Instant::now();
            src.read_raw(&mut raw).unwrap();
            slowest = slowest.max(t.elapsed());
            std::thread::sleep(Duration::from_millis(1));
        }
        // The meter blocks 300 ms per poll; a read is an atomic load.
        assert!(
            slowest < Duration::from_millis(50),
            "a read waited {slowest:?}"
        );
        let j = raw[0] as f64 * UJ;
        // Polls are back to back (300 ms each, over the 100 ms period), dated when asked: after
        // 1.5 s the total covers from the first poll to the newest, 1.2 to 1.8 s at 200 W.
        assert!((200.0 * 1.0..=200.0 * 1.9).contains(&j), "{j} J");
        assert!(src.take_counter_errors().is_empty());
    }

    #[test]
    fn a_power_meter_back_from_an_outage_gives_no_energy_for_it() {
        // Answers at 200 W, fails polls 3 to 10 (about 0.8 s at 100 ms), then answers again.
        struct Outage(Box<SlowMeter>);
        impl ReadingSource for Outage {
            fn provenance(&self) -> &Provenance {
                self.0.provenance()
            }
            fn channels(&self) -> &[Channel] {
                self.0.channels()
            }
            fn poll_period(&self) -> Duration {
                self.0.poll_period()
            }
            fn poll_deadline(&self) -> Duration {
                self.0.poll_deadline()
            }
            fn poll(&mut self) -> Result<Vec<Reading>, EnergyError> {
                let r = self.0.poll();
                match self.0.polls {
                    3..=10 => Err(EnergyError::Invalid("the BMC is rebooting".into())),
                    _ => r,
                }
            }
        }
        let start = Instant::now();
        let mut src = PolledSource::start(Box::new(Outage(meter(1, None)))).unwrap();
        std::thread::sleep(Duration::from_millis(1800));
        let mut raw = [0u64];
        src.read_raw(&mut raw).unwrap();
        let (j, secs) = (raw[0] as f64 * UJ, start.elapsed().as_secs_f64());
        // About 1 s of readings at 200 W: the 0.8 s without any is not filled in.
        assert!(j < 200.0 * (secs - 0.6), "{j} J over {secs} s");
        let errors = src.take_counter_errors();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("the energy of that time is missing")),
            "{errors:?}"
        );
    }

    #[test]
    fn a_meter_that_stops_answering_is_reported_once_and_then_as_stale() {
        let mut src = PolledSource::start(meter(1, Some(1))).unwrap();
        src.max_age_ns = Duration::from_millis(200).as_nanos() as u64;
        std::thread::sleep(Duration::from_millis(400));
        let errors = src.take_counter_errors();
        assert_eq!(
            errors
                .iter()
                .filter(|e| e.contains("stopped answering"))
                .count(),
            1,
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("no new reading")),
            "{errors:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert!(!src
            .take_counter_errors()
            .iter()
            .any(|e| e.contains("no new reading")));
    }
}
