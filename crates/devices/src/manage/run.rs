//! The live loop of `wattio power run`: each managed device's controller fed with its observed
//! accesses and the ghost hints received, its decisions written to the knobs (or, in a dry
//! run, only reported), every knob restored at the end.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wattio_energy::SysRoot;
use wattio_power::{
    Clock, DiskController, DiskPolicy, GhostHint, GhostPolicy, ModeId, PowerManager, RealClock,
};
use wattio_progress::Cancel;

use super::hints::HintSocket;
use super::knob::{device_knobs, DeviceKnob};
use super::ladder::KnobLadder;
use super::restore::{remove_record, restore_pending, KnobOriginal, RestoreOutcome, RestoreRecord};
use super::{figures_for, ManageError};
use crate::inventory::{storage_devices, StorageDevice};

/// How `power run` runs.
#[derive(Debug, Clone)]
pub struct ManageOptions {
    /// Write the knobs (else a dry run: decisions only).
    pub apply: bool,
    /// Manage a device holding `/` too.
    pub allow_root_device: bool,
    /// Only these devices (kernel names); all when empty.
    pub devices: Vec<String>,
    /// The Ghosts performance/energy knob, 0 (energy) ..= 100 (performance).
    pub knob: u8,
    /// The platform's base power, W (STPM's equation 2 charges it for the wake-up time).
    pub base_power_w: f64,
    /// The idle time after which a device without figures goes to its generic low level.
    pub idle_timeout: Duration,
    /// How often each device's I/O counters are read.
    pub poll_interval: Duration,
    /// Stop after this long (else at SIGINT/SIGTERM).
    pub duration: Option<Duration>,
    /// Where the restore record lives (a system path, resolved under the root).
    pub state_dir: PathBuf,
    /// The ghost-hint rule.
    pub ghost: GhostPolicy,
    /// The hint socket's path, where hints are taken.
    pub hints: Option<PathBuf>,
}

/// One decision of the manager.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerDecision {
    /// Seconds since the start.
    pub t_s: f64,
    /// The device.
    pub device: String,
    /// The mode left.
    pub from: String,
    /// The mode entered.
    pub to: String,
    /// The writes it makes (or would make): knob system path and value.
    pub writes: Vec<(PathBuf, String)>,
    /// Watts saved (negative: spent) and wake latency added, ms, by the device's own figures;
    /// `None` without figures.
    pub trade: Option<(f64, f64)>,
    /// Whether the writes were made (false in a dry run).
    pub applied: bool,
}

/// What the manager reports as it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum PowerEvent {
    /// A record left by a killed run was applied first.
    PendingRestored(RestoreOutcome),
    /// A device is managed, with this ladder's modes and figures.
    Managing {
        /// The device.
        device: String,
        /// Its mode names, the performance one first.
        modes: Vec<String>,
        /// The label of its figures; `None` on the generic ladder.
        figures: Option<String>,
    },
    /// A device is left alone, with why.
    Skipped {
        /// The device.
        device: String,
        /// Why.
        why: String,
    },
    /// A decision.
    Decision(PowerDecision),
    /// A knob refused a write: the device was restored and is no longer managed.
    DeviceFailed {
        /// The device.
        device: String,
        /// The one-line error naming the knob and value.
        error: String,
    },
    /// A ghost hint was handed to a device's controller.
    Hint {
        /// The device.
        device: String,
        /// Whether it started a transition to the performance mode.
        woke: bool,
    },
    /// A hint that could not be used.
    BadHint(String),
    /// The knobs were restored at the end.
    Restored(RestoreOutcome),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunSummary {
    /// Decisions taken.
    pub decisions: usize,
    /// Devices whose knob refused a write.
    pub failed_devices: Vec<String>,
    /// Knobs that could not be restored at the end (one line each); the record stays.
    pub unrestored: Vec<String>,
}

/// What the actuator shares with the loop.
struct ActuatorState {
    mode: ModeId,
    decisions: Vec<PowerDecision>,
    error: Option<ManageError>,
}

/// One managed device.
struct Managed {
    device: StorageDevice,
    handle: wattio_power::DeviceHandle,
    controller: DiskController,
    shared: Arc<Mutex<ActuatorState>>,
    originals: Vec<KnobOriginal>,
    last_counters: Option<Vec<u64>>,
    busy: bool,
}

fn lock(m: &Mutex<ActuatorState>) -> std::sync::MutexGuard<'_, ActuatorState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The I/O counters that change with an access (kernel Documentation/block/stat.rst).
fn access_counters(dev: &StorageDevice) -> Option<Vec<u64>> {
    crate::meter::read_block_stat(&dev.sysfs)
        .ok()
        .map(|c| c.accesses.to_vec())
}

/// Which devices to manage and their ladders; the others are reported as skipped.
fn plan(
    root: &SysRoot,
    opts: &ManageOptions,
    emit: &mut dyn FnMut(PowerEvent),
) -> Result<Vec<(StorageDevice, KnobLadder)>, ManageError> {
    let all = storage_devices(root).map_err(|e| ManageError::Refused {
        device: "/sys/block".into(),
        what: e.to_string(),
    })?;
    for name in &opts.devices {
        let Some(dev) = all.iter().find(|d| &d.name == name) else {
            return Err(ManageError::Refused {
                device: name.clone(),
                what: "no such block device (see `wattio power status`)".into(),
            });
        };
        if dev.holds_root && !opts.allow_root_device {
            return Err(ManageError::Refused {
                device: name.clone(),
                what: "it holds / (the root file system); add --allow-root-device to manage it"
                    .into(),
            });
        }
    }
    let chosen: Vec<StorageDevice> = all
        .into_iter()
        .filter(|d| opts.devices.is_empty() || opts.devices.contains(&d.name))
        .collect();
    let knobs: Vec<Vec<DeviceKnob>> = chosen.iter().map(|d| device_knobs(root, d)).collect();
    let mut out = Vec::new();
    for (dev, mut ks) in chosen.into_iter().zip(knobs.iter().cloned()) {
        // A runtime-PM knob shared by two disks (one controller) follows neither's accesses.
        ks.retain(|k| knobs.iter().flatten().filter(|o| o.path == k.path).count() == 1);
        let skip = if dev.is_virtual() {
            Some("a virtual disk: its power is the host's".to_string())
        } else if dev.holds_root && !opts.allow_root_device {
            Some("holds / (add --allow-root-device to manage it)".to_string())
        } else {
            None
        };
        if let Some(why) = skip {
            emit(PowerEvent::Skipped {
                device: dev.name,
                why,
            });
            continue;
        }
        let figures = figures_for(root, &dev);
        match KnobLadder::build(&dev.name, ks, figures.as_ref()) {
            Some(ladder) => out.push((dev, ladder)),
            None => emit(PowerEvent::Skipped {
                device: dev.name,
                why: "no kernel power knob it can be managed through".into(),
            }),
        }
    }
    Ok(out)
}

/// Writes (or, dry, only states) the move of `ladder`'s device from `from` to `to`.
fn decide(
    root: &SysRoot,
    ladder: &KnobLadder,
    apply: bool,
    t_s: f64,
    from: Option<ModeId>,
    to: ModeId,
) -> Result<PowerDecision, ManageError> {
    let target = &ladder.modes[to.0];
    let mut writes = Vec::new();
    for (i, knob) in ladder.knobs.iter().enumerate() {
        let value = &target.values[i];
        let differs = match from {
            Some(f) => &ladder.modes[f.0].values[i] != value,
            None => knob.read(root).map(|v| &v != value).unwrap_or(true),
        };
        if differs {
            writes.push((knob.path.clone(), value.clone()));
        }
    }
    if apply {
        for (path, value) in &writes {
            super::knob::write_knob(root, path, value)?;
        }
    }
    Ok(PowerDecision {
        t_s,
        device: ladder.device.clone(),
        from: from.map_or("(as found)".to_string(), |f| ladder.modes[f.0].name.clone()),
        to: target.name.clone(),
        writes,
        trade: from.and_then(|f| ladder.trade(f, to)),
        applied: apply,
    })
}

/// Puts `originals` back where they differ; the lines of those that could not be.
fn restore_knobs(root: &SysRoot, originals: &[KnobOriginal]) -> RestoreOutcome {
    RestoreRecord {
        pid: std::process::id(),
        knobs: originals.to_vec(),
    }
    .apply(root)
}

/// Builds the controller of one device, its actuator writing through [`decide`].
fn start_device(
    root: &SysRoot,
    pm: &Arc<PowerManager>,
    opts: &ManageOptions,
    device: StorageDevice,
    ladder: KnobLadder,
    originals: Vec<KnobOriginal>,
) -> Result<Managed, ManageError> {
    let power = |e: wattio_power::PmError| ManageError::Power {
        device: device.name.clone(),
        what: e.to_string(),
    };
    let handle = pm
        .register_device(ladder.spec(), ModeId(0))
        .map_err(power)?;
    let policy = if ladder.has_figures() {
        DiskPolicy::Stpm {
            knob: opts.knob as f64,
            base_power_w: opts.base_power_w,
        }
    } else if opts.knob >= 100 {
        DiskPolicy::Never
    } else {
        DiskPolicy::FixedTimeout(opts.idle_timeout.as_secs_f64())
    };
    let shared = Arc::new(Mutex::new(ActuatorState {
        mode: ModeId(0),
        decisions: Vec::new(),
        error: None,
    }));
    let (state, clock, root2, apply) = (
        Arc::clone(&shared),
        Arc::clone(pm.clock()),
        root.clone(),
        opts.apply,
    );
    let actuator = move |to: ModeId| {
        let mut s = lock(&state);
        match decide(&root2, &ladder, apply, clock.now(), Some(s.mode), to) {
            Ok(d) => {
                s.mode = to;
                s.decisions.push(d);
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                s.error.get_or_insert(e);
                Err(msg)
            }
        }
    };
    let controller = DiskController::new(Arc::clone(pm), handle, policy, Some(opts.ghost))
        .map_err(power)?
        .with_actuator(Box::new(actuator));
    Ok(Managed {
        last_counters: access_counters(&device),
        device,
        handle,
        controller,
        shared,
        originals,
        busy: false,
    })
}

/// Reads every knob's original value; a knob that cannot be read leaves its device alone.
fn originals_of(root: &SysRoot, ladder: &KnobLadder) -> Result<Vec<KnobOriginal>, ManageError> {
    ladder
        .knobs
        .iter()
        .map(|k| {
            Ok(KnobOriginal {
                path: k.path.clone(),
                original: k.read(root)?,
            })
        })
        .collect()
}

/// Feeds the device's observed accesses to its controller and takes the steps due.
fn step_device(m: &mut Managed) -> Result<(), wattio_power::ControlError> {
    if let Some(c) = access_counters(&m.device) {
        let in_flight = c[2] > 0;
        if m.last_counters.as_ref() != Some(&c) || in_flight {
            m.controller.on_access()?;
            m.busy = true;
        }
        if m.busy && !in_flight {
            m.controller.on_io_done();
            m.busy = false;
        }
        m.last_counters = Some(c);
    }
    m.controller.poll().map(|_| ())
}

/// The loop's state: the devices, the manager and what is reported.
struct Session<'a> {
    root: &'a SysRoot,
    pm: Arc<PowerManager>,
    managed: Vec<Managed>,
    summary: RunSummary,
    emit: &'a mut dyn FnMut(PowerEvent),
}

impl Session<'_> {
    /// Reports the decisions device `i`'s actuator took; on its error, restores the device
    /// and stops managing it.
    fn settle(&mut self, i: usize, result: Result<(), wattio_power::ControlError>) {
        let (decisions, error) = {
            let mut s = lock(&self.managed[i].shared);
            (std::mem::take(&mut s.decisions), s.error.take())
        };
        for d in decisions {
            self.summary.decisions += 1;
            (self.emit)(PowerEvent::Decision(d));
        }
        let Err(control) = result else {
            return;
        };
        let m = self.managed.remove(i);
        let error = error.map_or_else(|| control.to_string(), |e| e.to_string());
        let _ = restore_knobs(self.root, &m.originals);
        let _ = self.pm.deregister_device(m.handle);
        self.summary.failed_devices.push(m.device.name.clone());
        (self.emit)(PowerEvent::DeviceFailed {
            device: m.device.name,
            error,
        });
    }

    /// Hands the hints waiting on the socket to their devices.
    fn take_hints(&mut self, socket: &HintSocket) {
        for received in socket.drain() {
            let hint = match received {
                Ok(h) => h,
                Err(e) => {
                    (self.emit)(PowerEvent::BadHint(e));
                    continue;
                }
            };
            let Some(i) = self
                .managed
                .iter()
                .position(|m| m.device.name == hint.device)
            else {
                (self.emit)(PowerEvent::BadHint(format!(
                    "`{}` is not a managed device",
                    hint.device
                )));
                continue;
            };
            let ghost = GhostHint {
                t: self.pm.clock().now(),
                delta_t_s: hint.delta_t_s,
                delta_e_j: hint.delta_e_j,
                foreground: hint.foreground,
                bytes: hint.bytes,
            };
            let result = self.managed[i].controller.on_ghost(ghost);
            if let Ok(woke) = result {
                (self.emit)(PowerEvent::Hint {
                    device: hint.device,
                    woke,
                });
            }
            self.settle(i, result.map(|_| ()));
        }
    }

    /// How long to wait before the next look: the poll interval, the next device deadline
    /// or the end, whichever comes first.
    fn next_wait(&self, poll: Duration, end: Option<Instant>) -> Duration {
        let now = self.pm.clock().now();
        let deadline = self
            .managed
            .iter()
            .filter_map(|m| m.controller.next_deadline())
            .fold(f64::INFINITY, f64::min);
        let mut wait = poll.min(Duration::from_secs_f64((deadline - now).clamp(0.0, 3600.0)));
        if let Some(e) = end {
            wait = wait.min(e.saturating_duration_since(Instant::now()));
        }
        wait.max(Duration::from_millis(1))
    }

    /// Runs until cancelled or the duration is over.
    fn run(&mut self, opts: &ManageOptions, cancel: &Cancel, hints: Option<&HintSocket>) {
        let end = opts.duration.map(|d| Instant::now() + d);
        loop {
            if cancel.is_set() || end.is_some_and(|e| Instant::now() >= e) {
                return;
            }
            let mut i = 0;
            while i < self.managed.len() {
                let before = self.managed.len();
                let result = step_device(&mut self.managed[i]);
                self.settle(i, result);
                if self.managed.len() == before {
                    i += 1;
                }
            }
            if let Some(socket) = hints {
                self.take_hints(socket);
            }
            let wait = self.next_wait(opts.poll_interval, end);
            match hints {
                Some(socket) => {
                    if cancel.wait_readable(socket.socket(), Some(wait)).is_err() {
                        cancel.sleep(wait);
                    }
                }
                None => {
                    cancel.sleep(wait);
                }
            }
        }
    }
}

/// Runs the power manager until `cancel` is set or `opts.duration` is over, reporting through
/// `emit`; with `opts.apply`, writes the restore record before the first write and restores
/// every knob at the end. A record left by a killed run is applied first.
pub fn run_manager(
    root: &SysRoot,
    opts: &ManageOptions,
    cancel: &Cancel,
    emit: &mut dyn FnMut(PowerEvent),
) -> Result<RunSummary, ManageError> {
    if let Some(outcome) = restore_pending(root, &opts.state_dir)? {
        let failed = outcome.failed.clone();
        emit(PowerEvent::PendingRestored(outcome));
        if let Some(first) = failed.first() {
            return Err(ManageError::Record {
                path: super::record_path(root, &opts.state_dir),
                what: format!("a knob could not be restored ({first}); fix it, then run `wattio power restore`"),
            });
        }
    }
    let mut ready = Vec::new();
    for (dev, ladder) in plan(root, opts, emit)? {
        match originals_of(root, &ladder) {
            Ok(o) => ready.push((dev, ladder, o)),
            Err(e) => emit(PowerEvent::DeviceFailed {
                device: dev.name,
                error: e.to_string(),
            }),
        }
    }
    let record = RestoreRecord {
        pid: std::process::id(),
        knobs: ready.iter().flat_map(|r| r.2.clone()).collect(),
    };
    if opts.apply && !record.knobs.is_empty() {
        record.save(root, &opts.state_dir)?;
    }
    let hints = opts.hints.as_deref().map(HintSocket::bind).transpose()?;
    let clock: Arc<dyn Clock> = Arc::new(RealClock::new());
    let pm =
        PowerManager::new(clock, opts.base_power_w, opts.knob).map_err(|e| ManageError::Power {
            device: "power manager".into(),
            what: e.to_string(),
        })?;
    let mut session = Session {
        root,
        pm: Arc::new(pm),
        managed: Vec::new(),
        summary: RunSummary::default(),
        emit,
    };
    for (dev, ladder, originals) in ready {
        // The device starts in the performance mode: its knobs are set to it first.
        match decide(root, &ladder, opts.apply, 0.0, None, ModeId(0)) {
            Ok(d) if d.writes.is_empty() => {}
            Ok(d) => {
                session.summary.decisions += 1;
                (session.emit)(PowerEvent::Decision(d));
            }
            Err(e) => {
                let _ = restore_knobs(root, &originals);
                session.summary.failed_devices.push(dev.name.clone());
                (session.emit)(PowerEvent::DeviceFailed {
                    device: dev.name,
                    error: e.to_string(),
                });
                continue;
            }
        }
        (session.emit)(PowerEvent::Managing {
            device: dev.name.clone(),
            modes: ladder.modes.iter().map(|m| m.name.clone()).collect(),
            figures: ladder.figures_label.clone(),
        });
        let name = dev.name.clone();
        match start_device(root, &session.pm, opts, dev, ladder, originals.clone()) {
            Ok(m) => session.managed.push(m),
            Err(e) => {
                let _ = restore_knobs(root, &originals);
                session.summary.failed_devices.push(name.clone());
                (session.emit)(PowerEvent::DeviceFailed {
                    device: name,
                    error: e.to_string(),
                });
            }
        }
    }
    session.run(opts, cancel, hints.as_ref());
    if opts.apply && !record.knobs.is_empty() {
        let outcome = record.apply(root);
        session.summary.unrestored = outcome.failed.clone();
        (session.emit)(PowerEvent::Restored(outcome));
        if session.summary.unrestored.is_empty() {
            remove_record(root, &opts.state_dir)?;
        }
    }
    Ok(session.summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::{FiguresSource, PowerFigures, PowerState};
    use crate::manage::knob::KnobKind;

    /// An NVMe decision writes the tolerance that admits the state and states its trade by the
    /// drive's own (hand-built) figures.
    #[test]
    fn an_nvme_decision_writes_the_tolerance_and_states_its_trade() {
        let t = tempfile::tempdir().unwrap();
        let root = SysRoot::new(t.path());
        let knob = "/sys/class/nvme/nvme0/power/pm_qos_latency_tolerance_us";
        std::fs::create_dir_all(root.path("/sys/class/nvme/nvme0/power")).unwrap();
        std::fs::write(root.path(knob), "100000\n").unwrap();
        let ps = |id: u8, w: f64, nops: bool, en: u64, ex: u64| PowerState {
            id,
            name: format!("ps{id}"),
            max_w: w,
            idle_w: None,
            active_w: None,
            non_operational: nops,
            entry_latency_us: en,
            exit_latency_us: ex,
        };
        let figures = PowerFigures {
            states: vec![ps(0, 6.0, false, 0, 0), ps(3, 0.1, true, 2000, 8000)],
            source: FiguresSource::NvmeDescriptors,
        };
        let knobs = vec![DeviceKnob {
            kind: KnobKind::NvmeLatencyTolerance,
            path: knob.into(),
        }];
        let ladder = KnobLadder::build("nvme0n1", knobs, Some(&figures)).unwrap();
        let first = decide(&root, &ladder, true, 0.0, None, ModeId(0)).unwrap();
        assert_eq!(first.writes, [(PathBuf::from(knob), "0".to_string())]);
        let d = decide(&root, &ladder, true, 1.0, Some(ModeId(0)), ModeId(1)).unwrap();
        // 2000 + 8000 µs admits PS3: tolerance 10000; saves 6 − 0.1 W, adds 8 ms.
        assert_eq!(d.writes, [(PathBuf::from(knob), "10000".to_string())]);
        assert_eq!(std::fs::read_to_string(root.path(knob)).unwrap(), "10000\n");
        let (w, ms) = d.trade.unwrap();
        assert!((w - 5.9).abs() < 1e-12 && (ms - 8.0).abs() < 1e-12);
        assert_eq!(
            (d.from.as_str(), d.to.as_str()),
            ("apst-off", "apst≤10000us")
        );
    }
}
