//! The storage energy meter: one thread polls each device's power state at the rate the device
//! tolerates and keeps the time spent in each; a snapshot adds the block counters and the
//! runtime-PM residency, and two snapshots give each device's [`StorageEnergy`].

mod energy;
mod sysfs;

pub(crate) use sysfs::read_block_stat;
mod tally;

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wattio_energy::SysRoot;

use crate::error::DeviceError;
use crate::figures::PowerFigures;
use crate::inventory::{storage_devices, StorageDevice};
use crate::state::PowerStateReader;

pub use energy::{storage_energy_between, StateResidency, StorageEnergy};
use tally::Tally;

/// The polling interval is kept within these, whatever a reader asks: a reader cannot make the
/// thread spin, nor leave its device unread for minutes.
const POLL_BOUNDS: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

/// What the meter knows of one device that does not change while it runs.
#[derive(Debug)]
pub(crate) struct DiskSetup {
    pub(crate) device: StorageDevice,
    /// Its power figures, where a reader gives them.
    pub(crate) figures: Option<PowerFigures>,
    /// Why it has none (no reader, the reader failed to open).
    pub(crate) no_figures: String,
    /// How often its state is read, where it has a reader.
    pub(crate) poll: Option<Duration>,
    /// Its runtime-PM `power/` directory, where it has `runtime_suspended_time`.
    pub(crate) power_dir: Option<PathBuf>,
}

/// The polling thread's shared state.
struct Polled {
    /// One tally per device with a reader (by device index).
    tallies: Vec<Option<Tally>>,
    /// The last error of each device's reader, one line.
    errors: Vec<Option<String>>,
    stop: bool,
}

struct Shared {
    polled: Mutex<Polled>,
    wake: Condvar,
}

impl Shared {
    /// The state, even after a panic of the other side (the tallies stay consistent: each
    /// update is one call).
    fn lock(&self) -> MutexGuard<'_, Polled> {
        self.polled.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One device's counters at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct DiskSample {
    /// Cumulative seconds in each state of its figures since the meter started (empty without
    /// figures).
    pub residency_s: Vec<f64>,
    /// Cumulative seconds of unknown state.
    pub unknown_s: f64,
    /// `io_ticks` of `/sys/block/NAME/stat`, ms, where it was read.
    pub io_ticks_ms: Option<u64>,
    /// Sectors (512 bytes) read, cumulative.
    pub sectors_read: u64,
    /// Sectors (512 bytes) written, cumulative.
    pub sectors_written: u64,
    /// `power/runtime_suspended_time`, ms, where the device has it.
    pub suspended_ms: Option<u64>,
    /// Why something could not be read (the stat file, the reader), one line each.
    pub errors: Vec<String>,
}

/// Every metered device's counters at one monotonic instant.
#[derive(Debug, Clone)]
pub struct StorageSnapshot {
    /// When it was taken.
    pub at: Instant,
    /// One per device, in the meter's order.
    pub disks: Vec<DiskSample>,
    setup: Arc<Vec<DiskSetup>>,
}

/// Meters the machine's block devices: their power-state residency (polled by one thread),
/// busy time, bytes and runtime-PM residency.
pub struct StorageMeter {
    setup: Arc<Vec<DiskSetup>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A device and its reader, or why it has none.
type Opened = (StorageDevice, Result<Box<dyn PowerStateReader>, String>);

/// A reader and when it is next due.
struct Scheduled {
    index: usize,
    reader: Box<dyn PowerStateReader>,
    every: Duration,
    due: Instant,
}

impl StorageMeter {
    /// Meters `devices`, each with its reader where it has one (the caller opens them, e.g.
    /// with [`crate::open_reader`]). Each reader is read once here, so that the meter knows
    /// every state from the start; then a thread reads each at its
    /// [`PowerStateReader::min_interval`].
    pub fn new(devices: Vec<(StorageDevice, Option<Box<dyn PowerStateReader>>)>) -> StorageMeter {
        let devices = devices
            .into_iter()
            .map(|(d, r)| {
                let why = "no power figures: wattio has no power-state reader for this device";
                (d, r.ok_or_else(|| why.to_string()))
            })
            .collect();
        StorageMeter::with_readers(devices)
    }

    /// The machine's block devices ([`storage_devices`]) with the readers
    /// [`crate::open_reader`] opens; a reader that fails to open leaves its device without
    /// figures, the error as the reason.
    pub fn open(root: &SysRoot) -> Result<StorageMeter, DeviceError> {
        let devices = storage_devices(root)?
            .into_iter()
            .map(|d| {
                let reader = match crate::readers::open_reader(root, &d) {
                    Ok(Some(r)) => Ok(r),
                    Ok(None) => Err(
                        "no power figures: wattio has no power-state reader for this device"
                            .to_string(),
                    ),
                    Err(e) => Err(format!("no power figures: {e}")),
                };
                (d, reader)
            })
            .collect();
        Ok(StorageMeter::with_readers(devices))
    }

    fn with_readers(devices: Vec<Opened>) -> StorageMeter {
        let started = Instant::now();
        let mut setup = Vec::new();
        let mut scheduled = Vec::new();
        let mut tallies = Vec::new();
        let mut errors = Vec::new();
        for (index, (device, reader)) in devices.into_iter().enumerate() {
            let power_dir = sysfs::runtime_pm_dir(&device);
            let (figures, no_figures, poll, tally, error) = match reader {
                Ok(mut reader) => {
                    let figures = reader.figures().clone();
                    let every = reader.min_interval().clamp(POLL_BOUNDS.0, POLL_BOUNDS.1);
                    let mut tally = Tally::new(figures.states.len(), started);
                    let (state, error) = read_state(&mut *reader);
                    let now = Instant::now();
                    tally.record(now, state);
                    scheduled.push(Scheduled {
                        index,
                        reader,
                        every,
                        due: now + every,
                    });
                    (
                        Some(figures),
                        String::new(),
                        Some(every),
                        Some(tally),
                        error,
                    )
                }
                Err(why) => (None, why, None, None, None),
            };
            setup.push(DiskSetup {
                device,
                figures,
                no_figures,
                poll,
                power_dir,
            });
            tallies.push(tally);
            errors.push(error);
        }
        let shared = Arc::new(Shared {
            polled: Mutex::new(Polled {
                tallies,
                errors,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let polled_indices: Vec<usize> = scheduled.iter().map(|s| s.index).collect();
        let thread = match scheduled.is_empty() {
            true => None,
            false => {
                let for_thread = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("wattio-storage-poll".into())
                    .spawn(move || poll_loop(&for_thread, scheduled));
                match spawned {
                    Ok(t) => Some(t),
                    Err(e) => {
                        // No polling: each device's time is of unknown state from now on.
                        let mut polled = shared.lock();
                        for i in polled_indices {
                            polled.errors[i] = Some(format!(
                                "the state polling thread could not start ({e}): free some memory or threads and run again"
                            ));
                            if let Some(t) = polled.tallies[i].as_mut() {
                                t.record(Instant::now(), None);
                            }
                        }
                        None
                    }
                }
            }
        };
        StorageMeter {
            setup: Arc::new(setup),
            shared,
            thread,
        }
    }

    /// The metered devices, in order.
    pub fn devices(&self) -> impl Iterator<Item = &StorageDevice> {
        self.setup.iter().map(|s| &s.device)
    }

    /// Whether any device can have an energy interval (power figures, not a virtual disk).
    pub fn any_figures(&self) -> bool {
        self.setup
            .iter()
            .any(|s| s.figures.is_some() && !s.device.is_virtual())
    }

    /// Every device's cumulative counters now.
    pub fn snapshot(&self) -> StorageSnapshot {
        let at = Instant::now();
        let (residency, reader_errors): (Vec<_>, Vec<_>) = {
            let polled = self.shared.lock();
            let r = polled
                .tallies
                .iter()
                .map(|t| t.as_ref().map(|t| t.up_to(at)))
                .collect();
            (r, polled.errors.clone())
        };
        let disks = self
            .setup
            .iter()
            .zip(residency)
            .zip(reader_errors)
            .map(|((s, residency), reader_error)| {
                let (residency_s, unknown_s) = residency.unwrap_or_default();
                let mut errors: Vec<String> = reader_error.into_iter().collect();
                let counters = match sysfs::read_block_stat(&s.device.sysfs) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        errors.push(e);
                        None
                    }
                };
                DiskSample {
                    residency_s,
                    unknown_s,
                    io_ticks_ms: counters.map(|c| c.io_ticks_ms),
                    sectors_read: counters.map_or(0, |c| c.sectors_read),
                    sectors_written: counters.map_or(0, |c| c.sectors_written),
                    suspended_ms: s.power_dir.as_deref().and_then(sysfs::read_suspended_ms),
                    errors,
                }
            })
            .collect();
        StorageSnapshot {
            at,
            disks,
            setup: self.setup.clone(),
        }
    }
}

impl Drop for StorageMeter {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A reader's answer: the state, or `None` and the error as one line.
fn read_state(reader: &mut dyn PowerStateReader) -> (Option<usize>, Option<String>) {
    match reader.current_state() {
        Ok(s) => (s, None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The polling thread: reads each due reader (outside the lock: a read may take a while),
/// records it, and waits until the next is due or the meter stops.
fn poll_loop(shared: &Shared, mut scheduled: Vec<Scheduled>) {
    loop {
        for s in scheduled.iter_mut() {
            if Instant::now() < s.due {
                continue;
            }
            let (state, error) = read_state(&mut *s.reader);
            let at = Instant::now();
            s.due = at + s.every;
            let mut polled = shared.lock();
            if let Some(t) = polled.tallies[s.index].as_mut() {
                t.record(at, state);
            }
            polled.errors[s.index] = error;
        }
        let next = scheduled
            .iter()
            .map(|s| s.due)
            .min()
            .unwrap_or_else(|| Instant::now() + POLL_BOUNDS.1);
        let mut polled = shared.lock();
        // Each wait has its deadline: the next read due; a spurious wake just loops.
        while !polled.stop && Instant::now() < next {
            let left = next.saturating_duration_since(Instant::now());
            polled = match shared.wake.wait_timeout(polled, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        if polled.stop {
            return;
        }
    }
}
