//! How often a counter actually changes.
//!
//! A counter read faster than its hardware updates it returns the same value again: RAPL
//! updates its energy status registers about every millisecond (Intel SDM vol. 3B §15.10.1),
//! NVML's total-energy counter every 20 to 100 ms depending on the GPU. Rows asked faster than
//! that repeat values, and a window only a few updates long is mostly quantisation. `probe`
//! watches each counter for a moment and reports the mean time between its changes.

use crate::Source;
use serde::Serialize;
use std::time::{Duration, Instant};

/// What watching one counter found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct UpdatePeriod {
    /// Changes seen while watching.
    pub changes: u32,
    /// Mean time between two changes in milliseconds; `None` with fewer than two changes.
    pub period_ms: Option<f64>,
    /// How long the counter was watched, in milliseconds.
    pub watched_ms: f64,
    /// Readings of the counter while watching.
    pub reads: u32,
}

impl UpdatePeriod {
    /// Whether it changed at (nearly) every reading: then the period is the reading loop's,
    /// and the counter's own is that or shorter.
    pub fn changed_on_every_read(&self) -> bool {
        self.changes >= 2 && self.changes + 1 >= self.reads
    }

    /// The shortest period the watch allows: the measured one, or, for a counter seen to
    /// change once, half the watch (with a shorter period it would have changed twice).
    pub fn at_least_ms(&self) -> Option<f64> {
        match (self.period_ms, self.changes) {
            (Some(p), _) => Some(p),
            (None, 1) => Some(self.watched_ms / 2.0),
            _ => None,
        }
    }

    /// "changes every 0.98 ms" or "did not change twice in 300 ms".
    pub fn describe(&self) -> String {
        match self.period_ms {
            Some(p) if self.changed_on_every_read() => {
                format!("changed on every reading, so every {p:.2} ms or more often")
            }
            Some(p) => format!("changes every {p:.2} ms ({} changes watched)", self.changes),
            None => format!(
                "did not change twice in {:.0} ms (a counter that does not move, or one slower than that)",
                self.watched_ms
            ),
        }
    }
}

/// Changes per counter after which watching stops early: enough for a mean period good to a
/// few per cent at the polling granularity.
const ENOUGH_CHANGES: u32 = 20;
/// Time between two polls.
const POLL: Duration = Duration::from_micros(100);

/// Watches the counters of every source in `sources` for at most `budget` (less when every
/// counter changed [`ENOUGH_CHANGES`] times), all in one loop. Returns, per source, one entry
/// per counter; `None` for the counters `watch` leaves out (false) and for a source whose reads
/// fail.
pub fn watch_update_periods(
    sources: &mut [(&mut dyn Source, Vec<bool>)],
    budget: Duration,
) -> Vec<Vec<Option<UpdatePeriod>>> {
    struct Watch {
        raw: Vec<u64>,
        last: Vec<u64>,
        first_change: Vec<Option<Instant>>,
        last_change: Vec<Option<Instant>>,
        changes: Vec<u32>,
        reads: u32,
        failed: bool,
    }
    let start = Instant::now();
    let mut watches: Vec<Watch> = sources
        .iter_mut()
        .map(|(src, _)| {
            let n = src.counters().len();
            let mut last = vec![0u64; n];
            let failed = src.read_raw(&mut last).is_err();
            Watch {
                raw: vec![0; n],
                last,
                first_change: vec![None; n],
                last_change: vec![None; n],
                changes: vec![0; n],
                reads: 0,
                failed,
            }
        })
        .collect();
    let done = |watches: &[Watch], sources: &[(&mut dyn Source, Vec<bool>)]| {
        watches.iter().zip(sources).all(|(w, (_, watch))| {
            w.failed
                || w.changes
                    .iter()
                    .zip(watch)
                    .all(|(&c, &on)| !on || c >= ENOUGH_CHANGES)
        })
    };
    while start.elapsed() < budget && !done(&watches, sources) {
        std::thread::sleep(POLL);
        for (w, (src, _)) in watches.iter_mut().zip(sources.iter_mut()) {
            if w.failed {
                continue;
            }
            if src.read_raw(&mut w.raw).is_err() {
                w.failed = true;
                continue;
            }
            w.reads += 1;
            let now = Instant::now();
            for i in 0..w.raw.len() {
                if w.raw[i] != w.last[i] {
                    w.last[i] = w.raw[i];
                    w.changes[i] += 1;
                    w.first_change[i].get_or_insert(now);
                    w.last_change[i] = Some(now);
                }
            }
        }
    }
    let watched_ms = start.elapsed().as_secs_f64() * 1e3;
    watches
        .iter()
        .zip(sources.iter())
        .map(|(w, (_, watch))| {
            (0..w.changes.len())
                .map(|i| {
                    if w.failed || !watch[i] {
                        return None;
                    }
                    let period_ms = match (w.first_change[i], w.last_change[i]) {
                        (Some(a), Some(b)) if w.changes[i] >= 2 => {
                            Some((b - a).as_secs_f64() * 1e3 / (w.changes[i] - 1) as f64)
                        }
                        _ => None,
                    };
                    Some(UpdatePeriod {
                        changes: w.changes[i],
                        period_ms,
                        watched_ms,
                        reads: w.reads,
                    })
                })
                .collect()
        })
        .collect()
}

/// Whether counter `i` of `src` is a hardware counter whose changes mean something: not a
/// model's estimate, not a power reading wattio integrates itself (it changes on every read).
pub fn is_hardware_counter(src: &dyn Source, i: usize) -> bool {
    let p = src.counter_provenance(i);
    !p.estimated && p.model.is_none()
}
